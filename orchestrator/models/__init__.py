"""Models: the Model protocol, Gemini through google-genai, and the offline model."""

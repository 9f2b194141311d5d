"""ADK's client side on toolfleet: its Runner, session services and service interfaces."""

"""A recipe writer whose answer must be a structured recipe card.

Exercises output_schema (the answer is JSON of a pydantic model) with output_key (the
session state keeps the parsed card).
"""

from pydantic import BaseModel, Field

from toolfleet.adk import Agent


class RecipeCard(BaseModel):
    """One recipe, as the card printer takes it."""

    title: str = Field(description="The dish's name.")
    servings: int = Field(description="How many people it feeds.")
    steps: list[str] = Field(description="The steps, in order.")


root_agent = Agent(
    name="recipe_writer",
    model="gemini-2.0-flash",
    description="Writes recipe cards.",
    instruction="Write a short recipe card for the dish the user names.",
    output_schema=RecipeCard,
    output_key="card",
)

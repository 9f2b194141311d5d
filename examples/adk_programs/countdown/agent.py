"""A countdown that a LoopAgent repeats until its agent calls exit_loop.

Exercises an agent whose only tool is one of ADK's built-ins given as a function
(exit_loop), with nothing of the program's own for workers to serve.
"""

from toolfleet.adk import Agent, LoopAgent, exit_loop

counter = Agent(
    name="counter",
    model="gemini-2.0-flash",
    instruction="Say the next number down from three; at zero, call exit_loop.",
    tools=[exit_loop],
)

root_agent = LoopAgent(name="countdown", sub_agents=[counter], max_iterations=5)

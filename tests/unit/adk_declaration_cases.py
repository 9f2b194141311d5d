"""Tool functions ported from ADK's declaration tests (tests/unittests/tools of adk-python).

Each is defined at module level, as a worker imports a tool, and imports nothing of
toolfleet but its ToolContext, so that the same functions can be given to ADK's
FunctionTool to record the declarations test_adk_declarations.py expects.
"""
# ruff: noqa: UP006, UP035, UP037, UP045, RUF013 - the spellings of ADK's tests, on purpose

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncGenerator, Generator, Sequence
from enum import Enum
from typing import Annotated, Any, Dict, List, Literal, Optional

from pydantic import BaseModel, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

try:
    from toolfleet.shared.context import ToolContext
except ImportError:  # recording ADK's declarations, in a venv without toolfleet
    from google.adk.tools.tool_context import ToolContext  # type: ignore[no-redef]


class Color(Enum):
    """A simple enum for testing."""

    RED = "red"
    GREEN = "green"
    BLUE = "blue"


class InputEnum(Enum):
    AGENT = "agent"
    TOOL = "tool"


class Address(BaseModel):
    """A Pydantic model for nested object testing."""

    street: str = Field(..., description="Street address")
    city: str = Field(..., description="City name")
    zip_code: str = Field(..., pattern=r"^\d{5}$", description="US ZIP code")


class Person(BaseModel):
    """A Pydantic model with nested model."""

    name: str
    age: int
    address: Optional[Address] = None


class AnnotatedAddress(BaseModel):
    """A Pydantic model whose fields carry Annotated metadata."""

    city: Annotated[str, Field(description="City name")]
    zip_code: Annotated[str, Field(description="US ZIP code", pattern=r"^\d{5}$")]


class AliasedAddress(BaseModel):
    """A Pydantic model with aliased fields."""

    city: str = Field(alias="cityName", description="City name")
    zip_code: str = Field(alias="postalCode", pattern=r"^\d{5}$")


@pydantic_dataclass
class Window:
    """A Pydantic dataclass for testing."""

    width: int
    height: int


@dataclasses.dataclass
class StandardReturnDataclass:
    """A standard library dataclass for testing."""

    status: str


class CustomInput(BaseModel):
    input_str: str


class ChildInput(BaseModel):
    input_str: str


class ParentInput(BaseModel):
    child: ChildInput


class SimpleFunction(BaseModel):
    input_str: str
    custom_input: int


class UserAddress(BaseModel):
    """User's address information."""

    street: str = Field(description="Street name and number")
    city: str = Field(description="City name")
    zipcode: str = Field(description="Postal code (5 digits)")


class ContactInfo(BaseModel):
    """Contact information."""

    email: str = Field(description="Email address in format user@domain.com")
    phone: str = Field(description="Phone number with country code")


class Profile(BaseModel):
    """Person information."""

    name: str = Field(description="Person's full name")
    age: int = Field(description="Person's age in years")
    contact: ContactInfo = Field(description="Contact information")


class Tag(BaseModel):
    """A tag."""

    name: str = Field(description="Tag name")
    color: str = Field(description="Tag color in hex format")


class Metadata(BaseModel):
    """Metadata information."""

    key: str = Field(description="Metadata key")
    value: str = Field(description="Metadata value")


class Config(BaseModel):
    """Configuration."""

    timeout: int = Field(description="Timeout in seconds")
    retries: int = Field(description="Number of retries")


class TreeNode(BaseModel):
    """A tree node."""

    value: str = Field(description="Node value")
    children: List[TreeNode] = Field(default_factory=list, description="Child nodes")


class Credentials(BaseModel):
    """API credentials."""

    api_key: str = Field(description="API key for authentication")
    secret: str = Field(description="API secret")


class CreateUserRequest(BaseModel):
    """Request to create a user."""

    name: str
    email: str
    age: Optional[int] = None


# test_build_function_declaration.py


def string_input(input_str: str) -> str:
    return input_str


def int_input(input_str: int) -> str:
    return str(input_str)


def float_input(input_str: float) -> str:
    return str(input_str)


def bool_input(input_str: bool) -> str:
    return str(input_str)


def array_input(input_str: List[str]) -> str:
    return ",".join(input_str)


def dict_input(input_str: Dict[str, str]) -> str:
    return str(input_str)


def basemodel_input(input: CustomInput) -> str:
    return input.input_str


def toolcontext_ignored(input_str: str, tool_context: ToolContext) -> str:
    return input_str


def nested_basemodel_input(input: ParentInput) -> str:
    return input.child.input_str


def list_input(input_str: List[str], input_dir: List[Dict[str, str]]) -> str:
    return ",".join(input_str)


def enum_input(input: InputEnum) -> str:
    return input.value


def basemodel_list(input_str: List[ParentInput]) -> str:
    return str(len(input_str))


def function_no_return(param: str):  # type: ignore[no-untyped-def]
    """A function with no return annotation."""
    return None


def function_none_return(param: str) -> None:
    """A function that explicitly returns None."""


def function_string_return(param: str) -> str:
    """A function that returns a string."""
    return param


def transfer_to_agent(agent_name: str, tool_context: ToolContext):  # type: ignore[no-untyped-def]
    """Transfer the question to another agent."""
    return None


# test_from_function_with_options.py


def dict_return(param: str) -> Dict[str, str]:
    """A test function that returns a dict."""
    return {"result": param}


def int_return(param: str) -> int:
    """A test function that returns an int."""
    return 42


def any_annotation(param: Any) -> Any:
    """A test function that uses Any type annotations."""
    return param


def no_params() -> None:
    """A test function with no parameters that returns None."""


def save_edit_ids(artifact_key: str, input_edit_ids: Sequence[str]) -> str:
    """Saves a sequence of edit IDs."""
    return f"Saved {len(input_edit_ids)} edit IDs for artifact {artifact_key}"


def sequence_return(names: list[str]) -> Sequence[str]:
    """Returns a sequence of names."""
    return names


async def async_generator_return(param: str) -> AsyncGenerator[str, None]:
    """A streaming function that yields strings."""
    yield param


def generator_return(param: str) -> Generator[int, None, None]:
    """A streaming function that yields integers."""
    yield 42


async def async_generator_dict(param: str) -> AsyncGenerator[Dict[str, str], None]:
    """A streaming function that yields dicts."""
    yield {"result": param}


def complex_tool(query: str, mode: str = "default", tags: list[str] | None = None) -> str:
    """A tool where one param has a complex union type."""
    return query


def complex_dict_tool(query: str, mode: str = "default", tags: dict[str, str] | None = None) -> str:
    return query


# test_annotated_parameter_descriptions.py


def repo_and_branch(
    repo: Annotated[str, Field(description="Repository URL from get_repository_info")],
    branch: Annotated[str, Field(description="Base branch for development")],
) -> dict[str, Any]:
    return {}


def mixed_annotations(
    annotated_param: Annotated[str, Field(description="This has a description")],
    regular_param: str,
) -> None:
    pass


def annotated_defaults(
    required_param: Annotated[str, Field(description="Required parameter")],
    optional_param: Annotated[str, Field(description="Optional parameter")] = "default_value",
) -> None:
    pass


def optional_annotated(
    optional_param: Annotated[Optional[str], Field(description="Optional string parameter")] = None,
) -> None:
    pass


def create_task(
    repository: Annotated[
        str,
        Field(
            description=("Full GitLab repository URL. MUST be obtained from get_repository_info.")
        ),
    ],
    base_branch: Annotated[
        str,
        Field(
            description=(
                "Base branch for development (e.g. 'main', 'develop'). "
                "MUST be obtained from get_repository_info."
            )
        ),
    ],
) -> dict[str, Any]:
    """Create a new task in the repository."""
    return {}


def simple_func(name: str, count: int) -> str:
    """A simple function."""
    return name * count


def search_repos(
    query: Annotated[str, Field(description="Search query for repositories")],
    limit: Annotated[int, Field(description="Maximum number of results to return")] = 10,
) -> list[Any]:
    """Search for repositories matching the query."""
    return []


def greet_annotated(
    name: Annotated[str, Field(description="Name of the person to greet")],
    greeting: Annotated[str, Field(description="Greeting to use")] = "Hello",
) -> str:
    """Greet a person."""
    return f"{greeting}, {name}!"


def create_user_with_address(
    address: Annotated[UserAddress, Field(description="User's residential address")],
) -> dict[str, Any]:
    """Create a new user with address."""
    return {"city": address.city}


def create_profile(
    person: Annotated[Profile, Field(description="User personal information")],
) -> dict[str, Any]:
    """Create a new user."""
    return {}


def create_tagged_item(
    tags: Annotated[List[Tag], Field(description="List of tags for the item")],
) -> dict[str, Any]:
    """Create an item with tags."""
    return {}


def create_item_with_metadata(
    metadata: Annotated[Optional[Metadata], Field(description="Optional metadata")] = None,
) -> dict[str, Any]:
    """Create an item with optional metadata."""
    return {}


def execute_task(
    task_name: Annotated[str, Field(description="Name of the task")],
    config: Annotated[Config, Field(description="Task configuration")],
    dry_run: Annotated[bool, Field(description="Run in dry-run mode")] = False,
) -> dict[str, Any]:
    """Execute a task with configuration."""
    return {}


def create_tree(
    root: Annotated[TreeNode, Field(description="Root node of the tree")],
) -> dict[str, Any]:
    """Create a tree structure."""
    return {"children": len(root.children)}


def authenticate(
    creds: Annotated[Credentials, Field(description="Authentication credentials")],
) -> dict[str, Any]:
    """Authenticate with API credentials."""
    return {}


# test_function_tool_declarations.py


def basic_string(name: str) -> str:
    return f"Hello, {name}!"


def basic_integer(n: int) -> int:
    return n * 2


def basic_float(x: float) -> float:
    return x * x


def basic_boolean(enabled: bool) -> bool:
    return not enabled


def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


def create_user(name: str, age: int, active: bool) -> str:
    """Create a new user."""
    return f"Created {name}"


def greet_with_default(name: str = "World") -> str:
    """Greet someone."""
    return f"Hello, {name}!"


def repeat(text: str, times: int = 3) -> str:
    """Repeat text."""
    return text * times


def search(query: str, limit: Optional[int] = None) -> str:
    """Search for something."""
    return query


def join_strings(items: list[str]) -> str:
    return ", ".join(items)


def sum_numbers(numbers: list[int]) -> int:
    return sum(numbers)


def process_data(data: dict[str, Any]) -> str:
    """Process a dictionary."""
    return str(data)


def sum_scores(scores: dict[str, int]) -> int:
    """Sum all scores."""
    return sum(scores.values())


def process_items(items: Sequence[str]) -> int:
    """Process items and return count."""
    return len(list(items))


def add_point(coords: tuple[int, int]) -> int:
    """Add coordinates."""
    x, y = coords
    return x + y


def set_color(color: Color) -> str:
    """Set the color."""
    return color.value


def set_mode(mode: Literal["fast", "slow", "auto"]) -> str:
    """Set the mode."""
    return mode


def configure_mode(mode: Literal["on", "off"] = "on") -> str:
    """Configure something."""
    return mode


def greet_optional(name: Optional[str] = None) -> str:
    """Greet someone."""
    return f"Hello, {name or 'World'}!"


def process_union(value: int | str) -> str:
    """Process a value."""
    return str(value)


def flexible_input(payload: int | str | dict[str, float] = 0) -> str:
    """Accept flexible input."""
    return str(payload)


def save_address(address: Address) -> str:
    """Save an address."""
    return f"Saved address in {address.city}"


def save_person(person: Person) -> str:
    """Save a person."""
    return f"Saved {person.name}"


def resize_window(window: Window) -> str:
    """Resize a window."""
    return f"Resized to {window.width}x{window.height}"


def save_addresses(addresses: list[Address]) -> int:
    """Save multiple addresses."""
    return len(addresses)


def get_status() -> StandardReturnDataclass:
    return StandardReturnDataclass(status="ok")


def configure_widgets(
    count: Annotated[int, Field(description="How many widgets", ge=1, le=10)],
    zip_code: Annotated[str, Field(pattern=r"^\d{5}$")],
    retries: Annotated[int, Field(description="Retry attempts")] = 3,
) -> str:
    return "ok"


def ship(
    address: Annotated[Optional[Address], Field(description="Where to ship")] = None,
) -> str:
    return "ok"


def forecast(
    days: Optional[Annotated[int, Field(description="Number of days", ge=1)]] = None,
) -> str:
    return "ok"


def register_annotated(address: AnnotatedAddress) -> str:
    return "ok"


def tally(
    scores: Annotated[list[Annotated[int, Field(ge=0)]], Field(description="Scores")],
) -> int:
    return sum(scores)


def count_items(items: list[str]) -> Annotated[int, Field(description="Item count")]:
    return len(items)


def aliased_count(
    count: Annotated[int, Field(alias="n", description="Count of items")],
) -> str:
    return str(count)


def register_aliased(
    address: Annotated[AliasedAddress, Field(description="Shipping address")],
) -> str:
    return address.city


def widgets_default(
    count: Annotated[int, Field(description="How many widgets")] = 5,
) -> str:
    return str(count)


def widgets_field_default(
    count: Annotated[int, Field(default=5, description="How many widgets")],
) -> str:
    return str(count)


def forward_list(items: list["Address"]) -> str:
    return "ok"


def forward_dict(mapping: dict[str, "Address"]) -> str:
    return "ok"


def forward_list_annotated(
    items: Annotated[list["Address"], Field(description="List of addresses")],
) -> str:
    return "ok"


def forward_dict_annotated(
    mapping: Annotated[dict[str, "Address"], Field(description="Map of addresses")],
) -> str:
    return "ok"


def fetch_user(user_id: str) -> "NonExistentUserType":  # type: ignore[name-defined]  # noqa: F821
    return None


def fetch_user_address(
    address: Optional["Address"] = None,
) -> "NonExistentUserType":  # type: ignore[name-defined]  # noqa: F821
    return None


def tags_factory_with_default(
    tags: Annotated[list[str], Field(default_factory=list)] = None,  # type: ignore[assignment]
) -> str:
    return ",".join(tags or [])


def tags_factory_required(tags: Annotated[list[str], Field(default_factory=list)]) -> str:
    return ",".join(tags)


def get_time() -> str:
    """Get current time."""
    return "12:00"


def legacy_function(x, y):  # type: ignore[no-untyped-def]
    """A legacy function without types."""
    return x + y


def process_any(data: Any) -> str:
    """Process any data."""
    return str(data)


def my_tool(query: str, tool_context: ToolContext) -> str:
    """A tool that uses context."""
    return query


def well_documented(x: int) -> int:
    """This is a well-documented function.

    It does something useful.

    Args:
      x: The number to square.

    Returns:
      The squared number.
    """
    return x


def undocumented(x: int) -> int:
    return x


def complex_fn(
    color: Color,
    tags: list[str],
    mode: Literal["fast", "slow"] = "fast",
    count: Optional[int] = None,
    address: Optional[Address] = None,
    window: Optional[Window] = None,
    payload: int | str | dict[str, float] = 0,
    colors: Optional[list[Color]] = None,
) -> None:
    """A complex function with many parameter types."""


async def streaming_tool(param: str) -> AsyncGenerator[str, None]:
    """A streaming tool that yields strings."""
    yield param


async def counter(start: int) -> AsyncGenerator[int, None]:
    """A streaming counter."""
    yield start


async def streaming_dict(param: str) -> AsyncGenerator[dict[str, str], None]:
    """A streaming tool that yields dicts."""
    yield {"result": param}


def sync_streaming_tool(param: str) -> Generator[str, None, None]:
    """A sync streaming tool that yields strings."""
    yield param


def sync_counter(start: int) -> Generator[int, None, None]:
    """A sync streaming counter."""
    yield start


def get_weather(key: str, city: str) -> str:
    """Current weather for a city."""
    return city


def get_forecast(key: str, city: str) -> str:
    """Forecast for a city."""
    return city


weather_partial = functools.partial(get_weather, "k")
nested_weather_partial = functools.partial(functools.partial(get_weather, "k"))
forecast_partial = functools.partial(get_forecast, "k")


class OrderLookup:
    def __call__(self, order_id: str) -> str:
        """Finds an order by id."""
        return order_id


class Documented:
    """Class-level docs."""

    def __call__(self, x: int) -> int:
        return x


class AsyncOrderLookup:
    async def __call__(self, order_id: str) -> str:
        """Finds an order by id, awaiting the store."""
        return order_id


order_lookup = OrderLookup()
documented = Documented()
async_order_lookup = AsyncOrderLookup()


# Types ADK's declarations take that the tests above do not cover.


def store_blob(data: bytes) -> int:
    """Stores a blob."""
    return len(data)


def paint(color: Color = "purple") -> str:  # type: ignore[assignment]
    """Paints; its default is not a member of Color."""
    return str(color)


def paint_default(color: Color = Color.RED) -> str:
    """Paints, red unless told."""
    return color.value

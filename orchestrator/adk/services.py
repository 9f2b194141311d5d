"""ADK's artifact and memory service interfaces, with toolfleet's Redis stores as the
defaults. Tools reach artifacts and memory through their ToolContext on the workers,
which use these Redis stores; a Runner accepts the services and checks they are ones
the workers can use."""

from __future__ import annotations


class BaseArtifactService:
    """ADK's artifact service interface; toolfleet keeps artifacts in the fleet's Redis."""


class BaseMemoryService:
    """ADK's memory service interface; toolfleet keeps memory in the fleet's Redis."""


class RedisArtifactService(BaseArtifactService):
    """Artifacts in the fleet's Redis, as tools' `save_artifact`/`load_artifact` use them
    (toolfleet.shared.artifacts.ArtifactStore, on the workers)."""


class RedisMemoryService(BaseMemoryService):
    """Memory in the fleet's Redis, as tools' `search_memory` reads it
    (toolfleet.shared.memory.MemoryStore, on the workers)."""


# ADK's in-memory names: the same stores (the session service's Redis is private when
# it runs the embedded default, so nothing outlives the program there either).
InMemoryArtifactService = RedisArtifactService
InMemoryMemoryService = RedisMemoryService


def check_service(service: object, base: type, default: type, what: str) -> None:
    """Refuse a service the workers cannot use, saying what to pass instead."""
    if service is None or isinstance(service, default):
        return
    raise TypeError(
        f"{what}={type(service).__name__}(): toolfleet's tools run on workers, which keep "
        f"{what.removesuffix('_service')}s in the fleet's Redis; pass {default.__name__}() "
        f"or leave {what} out"
        + ("" if isinstance(service, base) else f" (it is not a {base.__name__} either)")
    )

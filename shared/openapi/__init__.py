"""Tools from an OpenAPI spec: one per operation, called with httpx on the workers."""

from toolfleet.shared.openapi.toolset import OpenAPIToolset, RestApiTool

__all__ = ["OpenAPIToolset", "RestApiTool"]

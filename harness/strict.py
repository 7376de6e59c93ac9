"""The base of every input model: unknown keys are errors (a typo must never be silently ignored)."""

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

"""The base of every input model: unknown keys are errors (a typo must never be silently ignored), and values
are taken as written: no ``true`` read as 1 where a number or size is expected, no ``.inf`` or ``.nan``."""

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

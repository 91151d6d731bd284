"""Configs are frozen dataclasses; overrides replace fields by name.

Presets are module-level instances. Entry points turn flags into a dict of
overrides and call `override`, which rejects names the config does not have by
listing the ones it does.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, TypeVar

from common.errors import choice_error

C = TypeVar("C")


def override(config: C, overrides: Mapping[str, Any], what: str) -> C:
    """`config` with `overrides` applied; unknown names raise a `UsageError`."""
    known = [field.name for field in dataclasses.fields(config)]
    for name in overrides:
        if name not in known:
            raise choice_error(f"{what} option", name, known)
    return dataclasses.replace(config, **overrides)


def to_json(config: Any) -> str:
    """The resolved config as JSON, for the run directory."""
    return json.dumps(dataclasses.asdict(config), indent=2, sort_keys=True, default=str)

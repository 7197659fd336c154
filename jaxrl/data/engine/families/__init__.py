"""The registry of operator families, by category module."""

from __future__ import annotations

from jaxrl.data.engine.families.base import Draw, Family, FamilyInfo, Recipe
from jaxrl.data.engine.families.compositions import composition_families
from jaxrl.data.engine.families.elementwise import elementwise_families
from jaxrl.data.engine.families.layout import layout_families
from jaxrl.data.engine.families.losses import loss_families
from jaxrl.data.engine.families.matmul import matmul_families
from jaxrl.data.engine.families.normalization import normalization_families
from jaxrl.data.engine.families.reductions import reduction_families


def _registry() -> dict[str, Family]:
    families: list[Family] = (elementwise_families() + reduction_families() + normalization_families()
                              + matmul_families() + layout_families() + loss_families() + composition_families())
    registry: dict[str, Family] = {}
    for family in families:
        if family.name in registry:
            raise ValueError(f"two families are named {family.name!r}")
        registry[family.name] = family
    return registry


FAMILIES: dict[str, Family] = _registry()


def get_family(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown family {name!r}; known families: {', '.join(FAMILIES)}") from None


__all__ = ["FAMILIES", "Draw", "Family", "FamilyInfo", "Recipe", "get_family"]

"""The ceiling check of the small project in this workspace."""


def over_ceiling(estimate: int, ceiling: int | None) -> bool:
    """True when a request of ``estimate`` tokens must not be sent."""
    if ceiling is None:
        return False
    return estimate > ceiling


def notice_due(estimate: int, ceiling: int | None) -> bool:
    """True when the turn should tell the model how close it is to the ceiling."""
    return ceiling is not None and estimate >= 0.8 * ceiling

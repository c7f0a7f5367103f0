"""The signals package: ours is the one imported, its names re-exported, its import cheap."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import signals

REPOSITORY = Path(__file__).resolve().parents[1]


def test_the_imported_signals_package_is_foldlines() -> None:
    assert Path(signals.__file__).resolve() == REPOSITORY / "signals" / "__init__.py"


def test_every_public_name_is_re_exported_from_its_module() -> None:
    import signals.bus
    import signals.envelope
    import signals.events
    import signals.sinks
    import signals.throughput

    for name in signals.__all__:
        value = getattr(signals, name)
        home = signals._EXPORTS[name]
        assert value is getattr(sys.modules[home], name), name
    assert set(signals.__all__) <= set(dir(signals))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'signals' has no attribute 'Nope'"):
        signals.Nope  # noqa: B018


def test_importing_the_package_loads_neither_anyio_nor_structlog() -> None:
    probe = (
        "import json, sys; import signals; "
        "print(json.dumps(sorted(m for m in ('anyio', 'structlog', 'attrs', 'signals.bus') if m in sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPOSITORY, capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) == []

#!/usr/bin/env bash
# The package as a user gets it: build the sdist and the wheel, check their metadata,
# install the wheel into fresh virtual environments (never the checkout) and check that
# the base install pulls neither trio-websocket nor wsproto (nor OpenTelemetry), that
# `import trio_relay` works there and `import trio_relay.testing` and
# `trio_relay.OpenTelemetry()` name their extras, then that the [testing]
# extra runs the quickstart.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "== build (sdist and wheel)"
"$PY" -m build --sdist --wheel --outdir "$WORK/dist" . >"$WORK/build.log" 2>&1 \
    || { cat "$WORK/build.log"; exit 1; }
echo "== twine check"
"$PY" -m twine check --strict "$WORK"/dist/*
WHEEL=$(ls "$WORK"/dist/trio_relay-*.whl)

echo "== the wheel's contents"
"$PY" - "$WHEEL" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
assert tops == {"trio_relay"}, f"top-level entries besides trio_relay: {sorted(tops)}"
assert "trio_relay/py.typed" in names, "py.typed is missing from the wheel"
assert any(n.endswith("dist-info/licenses/LICENSE") for n in names), "LICENSE missing"
print(f"ok: {len(names)} files, one top-level package, py.typed and LICENSE")
PY

echo "== base install: no reference-connector libraries"
python3 -m venv "$WORK/base"
"$WORK/base/bin/python" -m pip install -q --report "$WORK/base.json" "$WHEEL"
"$PY" - "$WORK/base.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
names = sorted(item["metadata"]["name"].lower().replace("_", "-") for item in report["install"])
print("resolved:", " ".join(names))
bad = {"trio-websocket", "wsproto"} & set(names)
bad |= {n for n in names if n.startswith("opentelemetry")}  # the otel extra's only
assert not bad, f"the base wheel pulls {sorted(bad)}"
PY
(cd "$WORK" && base/bin/python - <<'PY'
import trio_relay, trio_relay.http, trio_relay.cli  # noqa: F401
try:
    import trio_relay.testing  # noqa: F401
except ImportError as exc:
    assert "trio_relay[testing]" in str(exc), exc
    print("ok: import trio_relay works; trio_relay.testing says:", exc)
else:
    raise SystemExit("trio_relay.testing imported without the testing extra")
try:
    trio_relay.OpenTelemetry()
except ImportError as exc:
    assert "trio_relay[otel]" in str(exc), exc
    print("ok: trio_relay.OpenTelemetry() says:", exc)
else:
    raise SystemExit("trio_relay.OpenTelemetry() worked without the otel extra")
PY
)

echo "== [testing] install: the quickstart"
python3 -m venv "$WORK/testing"
"$WORK/testing/bin/python" -m pip install -q "$WHEEL[testing]"
cp examples/quickstart.py "$WORK/quickstart.py"
(cd "$WORK" && testing/bin/python quickstart.py)
echo "== wheel check: ok"

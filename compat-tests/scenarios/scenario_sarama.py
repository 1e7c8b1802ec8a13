"""The client-library scenario with Sarama (Go), as Debian packages it. See scenario.py.

The scenario itself is sarama/main.go: Sarama 1.22.1 at the newest protocol version it knows
(sarama.MaxVersion, Kafka 2.2.0), writing the same rows as the Python scenarios. This wrapper
builds it offline in GOPATH mode against the Debian sources under /usr/share/gocode
(setup_sarama.sh installs them) into target/compat/sarama/, rebuilding only when main.go or the
Go toolchain changes, then runs it with the same arguments. CGO_ENABLED=0: Sarama then uses its
pure-Go build (only zstd, unused here, needs cgo), so no C compiler is needed. If the build
fails, every step is a failed row saying why; a step the program did not report (it crashed or
was killed) is a failed row too. Sarama's own log goes to target/compat/sarama/sarama.log.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import scenario as sc

CLIENT = "sarama"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SOURCE = HERE / "sarama" / "main.go"
OUT = ROOT / "target" / "compat" / "sarama"
BINARY = OUT / "sarama-scenario"
STAMP = OUT / "sarama-scenario.stamp"
SARAMA_LOG = OUT / "sarama.log"
DEBIAN_GOPATH = "/usr/share/gocode"
# Every step bounds its waits (scenario.py's STEP_TIMEOUT_S); this bounds the whole run.
RUN_TIMEOUT_S = len(sc.STEPS) * (sc.STEP_TIMEOUT_S + 60)


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GO111MODULE="off",
        # A private first entry: nothing is ever written under /usr/share/gocode.
        GOPATH=f"{OUT / 'gopath'}:{DEBIAN_GOPATH}",
        GOCACHE=str(OUT / "gocache"),
        GOPROXY="off",
        GOFLAGS="",
        CGO_ENABLED="0",
    )
    return env


def build() -> str | None:
    """Builds the scenario program if main.go or the toolchain changed; returns why it could not."""
    go = shutil.which("go")
    if go is None:
        return "go not found on PATH (run compat-tests/scenarios/setup_sarama.sh)"
    if not (Path(DEBIAN_GOPATH) / "src/github.com/Shopify/sarama").is_dir():
        return "Sarama sources missing under /usr/share/gocode (run compat-tests/scenarios/setup_sarama.sh)"
    env = go_env()
    version = subprocess.run([go, "version"], capture_output=True, text=True, env=env).stdout.strip()
    stamp = hashlib.sha256(SOURCE.read_bytes() + version.encode()).hexdigest()
    if BINARY.exists() and STAMP.exists() and STAMP.read_text().strip() == stamp:
        return None
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = BINARY.with_suffix(".tmp")
    print(f"[{CLIENT}] building {SOURCE.relative_to(ROOT)} ({version})", flush=True)
    try:
        p = subprocess.run(
            [go, "build", "-o", str(tmp), str(SOURCE)],
            capture_output=True,
            text=True,
            env=env,
            cwd=SOURCE.parent,
            timeout=600,
        )
    except subprocess.TimeoutExpired:
        return "go build did not finish within 600s"
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        return f"go build exited {p.returncode}: {(p.stdout + p.stderr).strip()[-300:]}"
    tmp.replace(BINARY)
    STAMP.write_text(stamp + "\n")
    return None


def reported_steps(results: str, offset: int) -> set[str]:
    """The steps this client has rows for in `results` after `offset`."""
    try:
        with open(results, "rb") as f:
            f.seek(offset)
            lines = f.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return set()
    return {cols[1] for cols in (line.split("\t") for line in lines) if len(cols) > 2 and cols[0] == CLIENT}


def main() -> int:
    args = sc.parse_args(CLIENT)
    s = sc.Scenario(CLIENT, args.results)
    why = build()
    if why is not None:
        for step in sc.STEPS:
            s.fail(step, f"build failed: {why}")
        return s.finish()
    results = os.path.abspath(args.results)
    offset = os.path.getsize(results) if os.path.exists(results) else 0
    cmd = [str(BINARY), "--bootstrap", args.bootstrap, "--results", results, "--topic", args.topic]
    cmd += ["--sarama-log", str(SARAMA_LOG)]
    try:
        rc = subprocess.run(cmd, timeout=RUN_TIMEOUT_S).returncode
        ended = f"exited {rc}"
    except subprocess.TimeoutExpired:
        rc, ended = 1, f"was killed after {RUN_TIMEOUT_S:.0f}s"
    missing = [step for step in sc.STEPS if step not in reported_steps(results, offset)]
    for step in missing:
        s.fail(step, f"the sarama scenario program {ended} without reporting this step")
    return 1 if missing else rc


if __name__ == "__main__":
    sys.exit(main())

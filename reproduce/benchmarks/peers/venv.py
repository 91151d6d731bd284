"""The peer's own venv, created on first use from pinned requirements and reused.

Like the Makefile's `.venv`: a stamp file holds the requirements a venv was
installed from, so an edited pin file reinstalls and an unchanged one costs
nothing. The project's `.venv` is never touched: the peer needs PyTorch and
older gymnasium, which would clash with TensorFlow's pins.
"""

from __future__ import annotations

import json
import pathlib
import subprocess

from common.errors import UsageError

REQUIREMENTS = pathlib.Path(__file__).resolve().parent / "requirements"


class PeerUnavailableError(UsageError):
    """The peer cannot be installed here; the benchmark cannot run (exit 2)."""


def python(directory: pathlib.Path) -> pathlib.Path:
    return directory / "bin" / "python"


def ensure(peer: str, directory: pathlib.Path, base_python: str) -> pathlib.Path:
    """The peer venv's interpreter, after installing `requirements/<peer>.txt` if needed.

    Raises `PeerUnavailableError` with pip's last error line when it fails.
    """
    requirements = REQUIREMENTS / f"{peer}.txt"
    if not _stamped(directory, requirements):
        directory.mkdir(parents=True, exist_ok=True)
        if not python(directory).exists():
            _run([base_python, "-m", "venv", str(directory)], directory, peer)
        # torch alone first: with it in place, nothing below can pull in torch's
        # CUDA packages (several GB); the pin in the file then keeps it.
        _run([str(python(directory)), "-m", "pip", "install", _pin(requirements, "torch")], directory, peer)
        _run([str(python(directory)), "-m", "pip", "install", "-r", str(requirements)], directory, peer)
        _stamp(directory, requirements)
    return python(directory)


def ensure_optional(peer: str, extra: str, directory: pathlib.Path) -> bool:
    """Installs `requirements/<peer>_<extra>.txt` into the peer venv; False if it does not install."""
    requirements = REQUIREMENTS / f"{peer}_{extra}.txt"
    if _stamped(directory, requirements):
        return True
    try:
        _run([str(python(directory)), "-m", "pip", "install", "-r", str(requirements)], directory, f"{peer}[{extra}]")
    except PeerUnavailableError as error:
        print(f"skipping {peer}'s {extra} configuration: {error}", flush=True)
        return False
    _stamp(directory, requirements)
    return True


def versions(interpreter: pathlib.Path, packages: list[str]) -> dict[str, str]:
    """Installed versions of `packages` in the venv of `interpreter` (None: not installed)."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "print(json.dumps({p: next((d.version for d in m.distributions(name=p)), None) for p in sys.argv[1:]}))"
    )
    out = subprocess.run([str(interpreter), "-c", code, *packages], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _pin(requirements: pathlib.Path, package: str) -> str:
    return next(line for line in requirements.read_text().splitlines() if line.startswith(f"{package}=="))


def _stamp_path(directory: pathlib.Path, requirements: pathlib.Path) -> pathlib.Path:
    return directory / f".installed-{requirements.name}"


def _stamped(directory: pathlib.Path, requirements: pathlib.Path) -> bool:
    stamp = _stamp_path(directory, requirements)
    return stamp.exists() and stamp.read_text() == requirements.read_text()


def _stamp(directory: pathlib.Path, requirements: pathlib.Path) -> None:
    _stamp_path(directory, requirements).write_text(requirements.read_text())


def _run(command: list[str], directory: pathlib.Path, what: str) -> None:
    """Runs an install step, its output going to `install.log` as it comes; a failure is one line."""
    log = directory / "install.log"
    print(f"installing {what} (output in {log}): {' '.join(command)}", flush=True)
    with open(log, "a") as f:
        f.write(f"$ {' '.join(command)}\n")
        f.flush()
        start = f.tell()
        try:
            code = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT).returncode
        except OSError as error:
            raise PeerUnavailableError(f"{what} cannot be installed: {command[0]}: {error.strerror}") from None
    if code != 0:
        output = log.read_text()[start:]
        raise PeerUnavailableError(f"{what} cannot be installed: {_last_error(output)} (full output: {log})")


def _last_error(output: str) -> str:
    """pip's own reason: its last ERROR line, else the last line it printed."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1]

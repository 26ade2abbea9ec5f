"""Prints what one suite of `make test` runs against, at its start, so that a failure names the versions it ran on.

    python3 setup/versions.py SUITE     # rust, python, django, ruby, typescript, go, elixir

Each line is read from the machine or a lockfile, never from a list kept here: the toolchain's own version, the
locked or installed versions of the suite's direct dependencies (Cargo.lock, the .venv, package-lock.json, go.mod)
and the Debian packages it uses (setup/debian-packages.txt's groups, as dpkg has them now). Nothing here fails a
run: what cannot be read is printed as such.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The Debian package groups (setup/debian-packages.txt) each suite uses.
GROUPS = {
    "rust": ["services"],
    "python": ["services"],
    "django": ["services"],
    "ruby": ["ruby", "services"],
    "typescript": ["typescript", "services"],
    "go": ["services"],
    "elixir": ["elixir", "services"],
}


def command(*argv: str) -> str:
    """The first line a command prints (stdout, else stderr), or why it could not run."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{argv[0]}: {error}"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if lines else f"{argv[0]}: no output"


def debian(groups: list[str]) -> str:
    listed = [line.split("#", 1)[0].split() for line in (ROOT / "setup" / "debian-packages.txt").read_text().splitlines()]
    names = [fields[1] for group in groups for fields in listed if len(fields) >= 2 and fields[0] == group]
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${Version} ${db:Status-Abbrev}\n", *names],
        capture_output=True,
        text=True,
        check=False,
    )
    found = {}
    for line in done.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2].startswith("ii"):
            found[fields[0]] = fields[1]
    return ", ".join(f"{name} {found.get(name, '(not installed)')}" for name in names)


def cargo_lock() -> str:
    wanted = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["dependencies"]
    locked: dict[str, list[str]] = {}
    for package in tomllib.loads((ROOT / "Cargo.lock").read_text())["package"]:
        if "source" in package:
            locked.setdefault(package["name"], []).append(package["version"])
    names = sorted(name for name in wanted if name in locked)
    return ", ".join(f"{name} {'/'.join(locked[name])}" for name in names)


def venv() -> str:
    python = ROOT / ".venv" / "bin" / "python"
    if not python.exists():
        return "(no .venv yet)"
    done = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        packages = json.loads(done.stdout)
    except json.JSONDecodeError:
        return f"(pip list failed: {done.stderr.strip()[-200:]})"
    return ", ".join(f"{p['name']} {p['version']}" for p in packages if p["name"] not in ("pip", "larder-cache"))


def package_lock() -> str:
    folder = ROOT / "clients" / "typescript"
    manifest = json.loads((folder / "package.json").read_text())
    lock = json.loads((folder / "package-lock.json").read_text())["packages"]
    direct = {**manifest.get("dependencies", {}), **manifest.get("devDependencies", {})}
    return ", ".join(f"{name} {lock.get(f'node_modules/{name}', {}).get('version', '?')}" for name in sorted(direct))


def go_mod() -> str:
    text = (ROOT / "clients" / "go" / "go.mod").read_text()
    direct = re.findall(r"^\s*(?:require\s+)?([\w./-]+\.[\w./-]+)\s+(v[\w.+-]+)\s*$", text, re.M)
    return ", ".join(f"{path} {version}" for path, version in direct)


def lines(suite: str) -> list[str]:
    found: list[str] = []
    if suite == "rust":
        found += [command("rustc", "-V"), "Cargo.lock: " + cargo_lock()]
    elif suite in ("python", "django"):
        found += [command(str(ROOT / ".venv" / "bin" / "python"), "--version"), ".venv: " + venv()]
    elif suite == "ruby":
        found += [command("ruby", "-v")]
    elif suite == "typescript":
        found += ["node " + command("node", "--version"), "npm " + command("npm", "--version")]
        found += ["package-lock.json: " + package_lock()]
    elif suite == "go":
        found += [command("go", "version"), "go.mod: " + go_mod()]
    elif suite == "elixir":
        otp = command("erl", "-noshell", "-eval", "io:format(\"~s\", [erlang:system_info(otp_release)]), halt().")
        found += [command("elixir", "--short-version") + f" on OTP {otp}"]
    found.append("Debian: " + debian(GROUPS[suite]))
    return found


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] not in GROUPS:
        print(f"usage: {sys.argv[0]} {'|'.join(GROUPS)}", file=sys.stderr)
        return 2
    suite = sys.argv[1]
    for line in lines(suite):
        print(f"versions ({suite}): {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

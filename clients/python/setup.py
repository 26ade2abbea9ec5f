"""Build hooks (everything else is in pyproject.toml): the sdist and the wheel carry the Redis store's Lua scripts,
copied from the one copy every language loads, spec/redis/*.lua (spec/STORES.md §5), into `larder/stores/lua/`.

spec/redis lies outside this project's directory, where package data cannot point, and a copy kept in the source
tree would drift from it; so the copy is made when a distribution is built: into the sdist's tree (a wheel built
from that sdist then finds the scripts in its `src`), and into the wheel's build directory (from spec/redis when
building in the repository, else from the sdist's copy). A build that finds neither fails.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
SCRIPTS = ("delete_if.lua", "incr.lua", "tag.lua")
#: Where the scripts go inside the package (read by larder/stores/scripts.py).
PACKAGED = Path("larder") / "stores" / "lua"


def scripts() -> dict[str, bytes]:
    """The scripts' bytes: spec/redis in the repository, else the copy an sdist carries."""
    for directory in (HERE.parent.parent / "spec" / "redis", HERE / "src" / PACKAGED):
        if all((directory / name).is_file() for name in SCRIPTS):
            return {name: (directory / name).read_bytes() for name in SCRIPTS}
    where = "spec/redis in the repository, src/larder/stores/lua in an sdist"
    raise SystemExit(f"larder: the Redis scripts are missing ({where})")


def write_scripts(target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for name, data in scripts().items():
        (target / name).write_bytes(data)


class BuildPy(build_py):
    """build_py, then the scripts into the build directory (what the wheel is made of)."""

    def run(self) -> None:
        super().run()
        write_scripts(Path(self.build_lib) / PACKAGED)


class Sdist(sdist):
    """sdist, with the scripts in the released tree's package."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        write_scripts(Path(base_dir) / "src" / PACKAGED)


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})

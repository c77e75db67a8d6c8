"""Builds tfdist's native library (cc/) against the installed TensorFlow and MPI.

The metadata is in pyproject.toml; this file only adds the native build,
which build_support/native.py does (it is also runnable on its own).
"""
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_support import native  # noqa: E402


class BuildNativeLibrary(build_ext):
    """Compiles cc/ with g++ into <package>/lib/libtfdist.so instead of a Python extension."""

    def build_extension(self, ext: Extension) -> None:
        package_dir = Path(self.get_ext_fullpath(ext.name)).parent
        try:
            native.build(package_dir, Path(self.build_temp) / "objects")
        except native.BuildError as error:
            sys.exit(f"\ntfdist build failed: {error}\n")


setup(
    ext_modules=[Extension("tfdist.lib.libtfdist", sources=[])],
    cmdclass={"build_ext": BuildNativeLibrary},
)

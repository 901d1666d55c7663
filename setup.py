"""Build hook: pyproject.toml holds the metadata; this only names the cffi module."""
from setuptools import setup

setup(cffi_modules=["engine/build_engine.py:ffibuilder"])

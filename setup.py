"""Only what pip needs to build csrc/ into brainbot._kernel; metadata is in pyproject.toml."""

from setuptools import setup

setup(cffi_modules=["csrc/build_kernel.py:ffibuilder"])

"""Builds fairkv's Python package: pure-Python modules plus one cffi
extension (fairkv._native) compiled against the installed libfairkv."""
from setuptools import setup

setup(cffi_modules=["fairkv/_build.py:ffi"])

"""Only so that building jmp from a checkout writes nothing into it (issue 37): setuptools'
build tree (`build/`) and its metadata directory (`jmp_agent.egg-info/`) go to a temporary
directory, removed when the build ends. Everything else is in pyproject.toml."""

import atexit
import shutil
import tempfile

from setuptools import setup

_BUILD = tempfile.mkdtemp(prefix="jmp-build-")
atexit.register(shutil.rmtree, _BUILD, True)
setup(options={"build": {"build_base": _BUILD}, "egg_info": {"egg_base": _BUILD}})

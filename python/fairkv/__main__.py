"""``python -m fairkv --version``: the package's and the library's version."""
import sys

from . import __version__
from ._bench import fairkv_binary


def main(argv: list) -> int:
    if argv in (["--version"], ["-V"]):
        print(f"fairkv {__version__} (python package, libfairkv {__version__})")
        return 0
    if argv in (["--where"],):
        print(fairkv_binary() or "no fairkv binary found")
        return 0
    print("usage: python -m fairkv --version | --where", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Entry point of the frozen app: PyInstaller runs this file as __main__.

With no arguments it opens the desktop app, with a command it is the CLI, exactly like the
`swiftwriter` console script of a pip install."""

import multiprocessing
import sys

from swiftwriter.cli import main

if __name__ == "__main__":
    multiprocessing.freeze_support()  # a frozen child process must not start a second app
    sys.exit(main())

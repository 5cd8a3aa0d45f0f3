import sys

from swiftwriter.cli import main

sys.exit(main())

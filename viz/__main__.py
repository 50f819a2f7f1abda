import sys

from viz.cli import main

sys.exit(main())

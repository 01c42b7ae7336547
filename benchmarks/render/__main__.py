"""`python -m benchmarks.render [--check]`: see benchmarks/render/pages.py."""

import sys

from benchmarks.render.pages import main

sys.exit(main())

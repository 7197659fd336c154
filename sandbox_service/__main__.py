import sys

from sandbox_service.cli import main

sys.exit(main())

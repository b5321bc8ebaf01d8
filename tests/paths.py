"""Where the tests find the checkout and the shared material beside it."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository checkout
SHARED = ROOT.parent / "shared"  # reference CRDs, examples and measured data, beside the checkout

"""Where the tests find the checkout and the shared material beside it."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository checkout
SHARED = ROOT.parent / "shared"  # reference CRDs, examples and measured data, beside the checkout
# Real CRD schemas the manifests are validated against: the shared folder, and the repository's
# own copies of the schemas that folder lacks (tests/data/crds/SOURCES.txt says where each is from).
CRD_DIRS = (SHARED / "crds", ROOT / "tests" / "data" / "crds")

# Sourced by the scripts here, on a GPU machine that cannot reach a package index (the lent H200):
# aorta's dependencies come unpacked from .carry/site312.tar.xz (cp312, made by
# scripts/gpu/carry.sh), aorta and its plugins pip-installed editable from this checkout into the
# Python that holds the machine's torch, as CI's tests session does (entry points and the `aorta`
# script on PATH; editable, because pytest runs from the checkout, whose aorta_core/ comes first on
# sys.path and reaches the conf/ tree as aorta_core.conf only through the editable install).
OUT=${OUT:?set OUT}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PYTHONUNBUFFERED=1 AORTA_REPORT_PNG=0 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
  NVSHMEM_DISABLE_NVLS=1
# A device copy keeps files this checkout has since moved or deleted (an old aorta_core/conf/
# hid the installed config tree): with .carry/tree.txt (`git ls-files -z --cached --others
# --exclude-standard > .carry/tree.txt` before the call) every other source file goes.
[ -f .carry/tree.txt ] && python3 - <<'PRUNE'
import os, shutil
keep = set(open(".carry/tree.txt", encoding="utf-8").read().split("\0"))
skip = {".git", ".carry", ".nox", ".hypothesis"}
for top, dirs, files in os.walk(".", topdown=False):
    if skip & set(top.split(os.sep)) or ".egg-info" in top:
        continue
    if os.path.basename(top) == "__pycache__":
        shutil.rmtree(top)
        continue
    for name in files:
        path = os.path.relpath(os.path.join(top, name))
        if path not in keep:
            os.remove(path)
            print("removed stale", path)
    if top != "." and not os.listdir(top):
        os.rmdir(top)
PRUNE
SITE=/tmp/site312
mkdir -p "$SITE" "$OUT"
[ -f "$SITE/.unpacked" ] || { tar xJf .carry/site312.tar.xz -C "$SITE" && touch "$SITE/.unpacked"; }
# the carried packages join that Python through a .pth file (after its own site-packages)
echo "$SITE" > "$(python3 -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/aorta-carried.pth"
# the carried setuptools (>= 77, for the PEP 639 `license = "MIT"`) first: the image may hold an
# older one, which --no-build-isolation would build with
PYTHONPATH="$SITE" python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . \
  $(printf -- '-e %s ' plugins/aorta_*/) tests/third_party_collector 2>&1 \
  | grep -v -i warning
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__)"

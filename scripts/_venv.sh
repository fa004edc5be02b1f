# Shared by scripts/demo and scripts/test: make .venv (Python >= 3.11) and install into it.
ensure_venv() {
    local spec="$1"
    local python="${PYTHON:-}"
    if [ -z "$python" ]; then
        for candidate in python3.11 python3.12 python3.13 python3; do
            if command -v "$candidate" >/dev/null 2>&1; then python="$candidate"; break; fi
        done
    fi
    [ -n "$python" ] || { echo "adiskq needs Python 3.11 or newer; none was found on PATH" >&2; exit 1; }
    if [ ! -x .venv/bin/python ]; then
        echo "== creating .venv with $("$python" --version 2>&1)"
        "$python" -m venv .venv
    fi
    # shellcheck disable=SC1091
    source .venv/bin/activate
    echo "== upgrading pip in .venv"
    pip_install --upgrade pip
    echo "== installing adiskq ($spec) into .venv: compiles its C core with gcc, and fetches what is" \
        "missing (minutes the first time, seconds after)"
    # setuptools warns, for every editable install, that a folder named like the package in the
    # working folder may shadow it: here that folder is the package itself, so the warning is dropped.
    PYTHONWARNINGS="ignore:Editable installation" pip_install -e "$spec"
}

# pip, minus one machine-specific warning line per package; fails when pip fails.
pip_install() {
    python -m pip install --quiet "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }
    return "${PIPESTATUS[0]}"
}

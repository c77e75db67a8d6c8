# Sourced by the scripts, or by you from any directory (`source path/to/scripts/env.sh`):
# the environment every tfdist command runs in.
# The repository is found from this file's own location, so that PATH leads to the
# virtualenv wherever the shell stands; TFDIST_VENV may be absolute or relative to
# the repository.
_tfdist_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
_tfdist_venv="${TFDIST_VENV:-.venv}"
case "$_tfdist_venv" in
  /*) ;;
  *) _tfdist_venv="$_tfdist_root/$_tfdist_venv" ;;
esac
if [ ! -d "$_tfdist_venv/bin" ]; then
  echo "scripts/env.sh: no virtualenv at $_tfdist_venv; run $_tfdist_root/scripts/setup.sh" \
       "(or set TFDIST_VENV to yours)" >&2
fi
export PATH="$_tfdist_venv/bin:$PATH"
unset _tfdist_root _tfdist_venv
# Open MPI refuses to run as root without these; containers and CI are root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

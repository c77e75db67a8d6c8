# Sourced by the scripts: the environment every tfdist command runs in.
VENV="${TFDIST_VENV:-.venv}"
export PATH="$PWD/$VENV/bin:$PATH"
# Open MPI refuses to run as root without these; containers and CI are root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

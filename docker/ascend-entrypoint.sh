#!/bin/bash
# CANN's environment (library paths, ASCEND_* homes) for commands run without a login shell, then the command.
for f in /usr/local/Ascend/ascend-toolkit/set_env.sh /usr/local/Ascend/nnal/atb/set_env.sh; do
    # shellcheck disable=SC1090
    [ -f "$f" ] && . "$f"
done
export LD_LIBRARY_PATH="/usr/local/Ascend/driver/lib64/common:/usr/local/Ascend/driver/lib64/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$@"

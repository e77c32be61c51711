# Shared by the tests' shell scripts: progress lines and installing Debian packages.
#   . tests/container/lib.sh; apt_need kcat kcat
# shellcheck shell=bash

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# apt-get that waits, up to 10 minutes, for the locks another apt-get or dpkg holds (one run beside
# the tests, an unattended upgrade) instead of failing at once. DPkg::Lock::Timeout makes apt wait
# for dpkg's lock; `update` (the package lists' lock) and the download cache's lock ignore it
# (apt 2.6), so a run that failed on a lock is tried again.
apt_get() {
  local out status waited=0
  while :; do
    status=0
    out=$(DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@" 2>&1) || status=$?
    if [ "$status" = 0 ] || [[ "$out" != *"Could not get lock"* ]] || [ "$waited" -ge 600 ]; then
      [ -z "$out" ] || printf '%s\n' "$out" >&2
      return "$status"
    fi
    [ "$waited" = 0 ] && log "apt-get: another apt-get or dpkg holds a lock; waiting up to 10 minutes"
    sleep 2
    waited=$((waited + 2))
  done
}

apt_need() {  # apt_need <command> <package...>: install the packages unless <command> is there
  command -v "$1" >/dev/null 2>&1 && return 0
  log "installing ${*:2} with apt"
  if [ -z "${APT_UPDATED:-}" ]; then apt_get update -qq; APT_UPDATED=1; fi
  apt_get install -y -qq --no-install-recommends "${@:2}"
}

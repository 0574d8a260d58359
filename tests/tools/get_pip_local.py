"""Offline stand-in for the pip bootstrap script that `ansible-test sanity` downloads.

ansible-test creates an empty virtual environment for its import test and runs a "get-pip"
script in it, fetched from a host that is not reachable here. This stand-in does the same job
with what every CPython ships: `ensurepip` installs the bundled pip wheel, then that pip
installs the exact packages ansible-test asked for (e.g. pip==24.2) from the configured index.
"""
import ensurepip
import os
import subprocess
import sys

GET_PIP_ONLY_FLAGS = ('--no-setuptools', '--no-wheel')


def main():
    ensurepip.bootstrap(upgrade=True, default_pip=True)
    requested = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_FLAGS]
    if not requested:
        return
    # ansible-test runs this with a scrubbed environment, so pip's own config (proxy CA bundle)
    # is not seen: pass the system CA bundle explicitly where the machine has one.
    cert = [arg for path in ('/etc/ssl/certs/ca-certificates.crt',) if os.path.exists(path)
            for arg in ('--cert', path)]
    result = subprocess.call([sys.executable, '-m', 'pip', 'install', '--quiet'] + cert + requested)
    if result != 0:
        sys.stderr.write('pip bootstrap: could not install %s; keeping the pip bundled with Python\n'
                         % ' '.join(requested))


if __name__ == '__main__':
    main()

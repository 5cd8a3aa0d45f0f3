"""Experiments run from the checkout (`.venv/bin/python -m experiments.NAME`), outside the
shipped package: trials that informed a decision (README names each with its result) and
offline measurements that no command of the app reaches."""

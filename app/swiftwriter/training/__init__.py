"""Offline training of the learned drafter beside the engine: self-distilled text, features
from the frozen model, the training loop and its accuracy measures. The app and the command
line reach it through `pipeline.train_drafter`; a take never imports it."""

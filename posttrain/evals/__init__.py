"""Evaluation: base vs trained on held-out tasks, with statistics that survive a reviewer."""

"""The base models a spec can name: the presets and their GPU prices, the shape of each one's
stand-in for the dry run, and the step-time and memory model fitted to measured runs."""

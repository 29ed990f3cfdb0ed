"""What a run is: the spec's model (validated, with errors that name the field and the fix),
its bounds on size and templates, the keys read from a stored spec, and the plan a launch resolves
into, which every layer below the edge reads instead of parsing the spec again."""

"""No import circle between modules of the package (the layers themselves are held by
`lint-imports`, the contracts in pyproject.toml). grimp sees every import: inside functions
and under TYPE_CHECKING too, so a circle hidden in a function still fails here. A circle is
a design question: move the code to where it belongs, never hide the import."""

import grimp


def circles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """Each circle once: a direct import a -> b and the shortest chain back from b to a."""
    found: dict[frozenset[str], tuple[str, ...]] = {}
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                found.setdefault(frozenset(back), (importer, *back))
    return list(found.values())


def test_no_module_of_posttrain_reaches_itself_through_its_imports():
    graph = grimp.build_graph("posttrain", cache_dir=None)
    assert len(graph.modules) > 50  # the package itself, not an empty stand-in
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_check_finds_the_circle_an_upward_import_would_close():
    graph = grimp.build_graph("posttrain", cache_dir=None)
    graph.add_import(importer="posttrain.core.paths", imported="posttrain.tools.launch")
    assert any("posttrain.core.paths" in circle for circle in circles(graph))

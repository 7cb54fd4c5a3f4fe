"""The typer command-line interface: a thin shell over the service functions of each subpackage."""

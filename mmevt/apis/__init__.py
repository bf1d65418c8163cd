from .launch import find_config_arg, run_toolkit_tool, toolkit_of, toolkit_tool_path

__all__ = ['find_config_arg', 'run_toolkit_tool', 'toolkit_of', 'toolkit_tool_path']

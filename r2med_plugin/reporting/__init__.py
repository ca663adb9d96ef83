"""Result files and tables."""

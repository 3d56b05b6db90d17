"""The category-balanced snapshot asset and its share check."""

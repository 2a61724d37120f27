"""What healthy means: the profile and inventory schema, the YAML loader, the recipe's rules, waivers and the
shipped profiles."""

"""What healthy means: the profile's and the inventory's schemas, YAML read with each key's file:line, the recipe's
rules, waivers and the shipped profiles."""

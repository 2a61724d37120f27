"""A site's files loaded: the inventory (stations listed, or from Ansible groups), the profile each station is held to
(`extends:` resolved), the waivers and answer batteries it names; YAML in, validated models out."""

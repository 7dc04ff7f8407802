#!/bin/sh
# Regenerates overtime.ldif (the cn=config form of overtime.schema) with slaptest, so that
# the two never drift apart: slaptest parses the .schema exactly as slapd does and writes
# the cn=config entry it would store. Run it after every change of overtime.schema:
#
#   sitemgmt/ldap/gen-ldif.sh
#
# Needs slaptest (Debian: slapd) and the standard schemas in /etc/ldap/schema (override
# with LDAP_SCHEMA_DIR).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
schemadir=${LDAP_SCHEMA_DIR:-/etc/ldap/schema}
slaptest=${SLAPTEST:-$(command -v slaptest || echo /usr/sbin/slaptest)}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/slapd.d"

cat >"$tmp/slapd.conf" <<CONF
include $schemadir/core.schema
include $schemadir/cosine.schema
include $schemadir/nis.schema
include $schemadir/inetorgperson.schema
include $here/overtime.schema
CONF

if ! "$slaptest" -f "$tmp/slapd.conf" -F "$tmp/slapd.d" >"$tmp/slaptest.out" 2>&1; then
	cat "$tmp/slaptest.out" >&2
	exit 1
fi

# The schema lands as cn={4}overtime (after the four includes). Drop slapd's bookkeeping
# (CRC comment, operational attributes) and the {4} index from the RDN: the entry is
# meant to be added to a running server with ldapadd, which assigns the next free index,
# like the files in /etc/ldap/schema/*.ldif.
src=$(ls "$tmp"/slapd.d/cn=config/cn=schema/cn=*overtime.ldif)
{
	echo "# Overtime site manager schema, cn=config form."
	echo "# GENERATED from overtime.schema by gen-ldif.sh -- do not edit; edit the .schema and rerun."
	echo "# Load into a running slapd:  ldapadd -Y EXTERNAL -H ldapi:/// -f overtime.ldif"
	echo "# Depends on core, cosine, nis and inetorgperson."
	echo "#"
	sed -e '/^#/d' \
		-e '/^structuralObjectClass:/d' -e '/^entryUUID:/d' -e '/^creatorsName:/d' \
		-e '/^createTimestamp:/d' -e '/^entryCSN:/d' -e '/^modifiersName:/d' \
		-e '/^modifyTimestamp:/d' \
		-e 's/^dn: cn={[0-9]*}overtime\(,cn=schema,cn=config\)\{0,1\}$/dn: cn=overtime,cn=schema,cn=config/' \
		-e 's/^cn: {[0-9]*}overtime$/cn: overtime/' \
		"$src"
} >"$here/overtime.ldif.new"
mv "$here/overtime.ldif.new" "$here/overtime.ldif"
echo "wrote $here/overtime.ldif"

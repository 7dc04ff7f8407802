// Package bootsector makes the smallest honest VM disk for tests: a raw disk whose MBR
// boot sector, run by the BIOS, writes a message to the first serial port (COM1, 0x3f8)
// and halts. A test that sees the message on QEMU's serial output knows the VM booted
// from that disk. The code is assembled here by hand (no assembler needed):
//
//	7c00  fa          cli
//	7c01  31 c0       xor  ax, ax
//	7c03  8e d8       mov  ds, ax
//	7c05  be 16 7c    mov  si, msg        ; 0x7c16
//	7c08  ba f8 03    mov  dx, 0x3f8      ; COM1 data register
//	7c0b  ac          next: lodsb
//	7c0c  84 c0       test al, al
//	7c0e  74 03       jz   done
//	7c10  ee          out  dx, al         ; QEMU's UART takes a byte at any time
//	7c11  eb f8       jmp  next
//	7c13  f4          done: hlt
//	7c14  eb fd       jmp  done
//	7c16  msg, 0
//	7dfe  55 aa       boot signature
package bootsector

import "fmt"

var code = []byte{0xfa, 0x31, 0xc0, 0x8e, 0xd8, 0xbe, 0x16, 0x7c, 0xba, 0xf8, 0x03, 0xac, 0x84, 0xc0, 0x74, 0x03, 0xee, 0xeb, 0xf8, 0xf4, 0xeb, 0xfd}

// Sector is the 512-byte boot sector printing msg (at most 400 bytes, no NUL).
func Sector(msg string) []byte {
	if len(msg) > 400 {
		panic(fmt.Sprintf("bootsector: message of %d bytes", len(msg)))
	}
	s := make([]byte, 512)
	copy(s, code)
	copy(s[len(code):], msg)
	s[510], s[511] = 0x55, 0xaa
	return s
}

// Disk is a raw disk of size bytes (a multiple of 512, at least 512) starting with
// Sector(msg), zeros after it.
func Disk(msg string, size int) []byte {
	if size < 512 || size%512 != 0 {
		panic("bootsector: disk size must be a positive multiple of 512")
	}
	d := make([]byte, size)
	copy(d, Sector(msg))
	return d
}
